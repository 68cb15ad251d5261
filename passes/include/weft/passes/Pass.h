// Graph passes and the pass manager that runs one ordered pipeline of them.
#pragma once

#include "weft/ir/Graph.h"
#include "weft/runtime/Plan.h"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace weft::passes {

struct Program;
class Target;

/// One transformation of a graph, or of a whole program (Program.h). run() reports whether it
/// changed it, or a diagnostic.
class Pass {
public:
  virtual ~Pass() = default;
  /// The name weft-opt and WEFT_PRINT_IR_AFTER use ("dce").
  virtual std::string_view name() const = 0;
  /// A graph pass transforms one graph; on a program it runs on each of the program's graphs.
  virtual ir::Result<bool> run(ir::Graph& g) = 0;
  virtual ir::Result<bool> run(Program& p);
  /// Whether it works on the whole program (output-grads, mask-rows, split, lower, plan-memory).
  /// On a graph alone, output-grads, mask-rows and split find nothing to do (no gradients asked
  /// for, no probe); lower's executables are dropped with the program. The first three come
  /// before the graph passes, lower and plan-memory after them.
  virtual bool onProgram() const { return false; }
};

/// Base of the passes that transform a whole program.
class ProgramPass : public Pass {
public:
  ir::Result<bool> run(ir::Graph& g) override;
  ir::Result<bool> run(Program& p) override = 0;
  bool onProgram() const override { return true; }
};

/// Removes nodes whose results reach no output and no state update.
std::unique_ptr<Pass> createDeadCodeElimination();
/// Replaces a node by an earlier identical one (same op, operands and attributes).
std::unique_ptr<Pass> createCommonSubexpressionElimination();
/// Turns ops on `full` constants into constants, evaluated with the CPU kernels.
std::unique_ptr<Pass> createConstantFolding();
/// Algebraic rewrites: x*1, x+0, no-op movement ops, double negation, movement chains, redundant
/// expands before broadcasting ops.
std::unique_ptr<Pass> createAlgebraicSimplification();

/// Recomputes an elementwise value inside a later kernel that reads it across a heavy op (a
/// forward value the backward reads), from values alive there anyway, where that keeps fewer bytes
/// alive than storing it. Runs after CSE, before fusion; `target` says what a kernel computes.
std::unique_ptr<Pass> createRematerialize(std::shared_ptr<const Target> target);
/// "hoist": moves an elementwise node up to where the larger values it reads last die otherwise.
std::unique_ptr<Pass> createHoist();
/// "expand-softmax": softmax and log_softmax along the last dim (float, rank 2 or more) become the
/// primitives they compute, which fuse puts in one row kernel with the work around them. Runs
/// before fusion, when code is generated.
std::unique_ptr<Pass> createExpandSoftmax();
/// "split-sums": a sum over every dim but the last of a value an elementwise node computes, of
/// rank 3 or more, becomes a sum over the middle dims (which the kernel computing the value adds
/// up as it goes: isColumnReduction) and a small sum over dim 0. Runs before fusion, when code is
/// generated.
std::unique_ptr<Pass> createSplitSums();
/// Per matmul node of `matmuls`, whether it runs as a generated GEMM, leading the elementwise group
/// that reads its result (its epilogue) or alone. The fuse pass asks once per graph, about every
/// matmul that could (the frontend's matmulChooser measures their shapes together).
using MatmulChooser =
    std::function<std::vector<bool>(const ir::Graph&, const std::vector<const ir::Node*>& matmuls)>;
/// Groups elementwise nodes into the kernels codegen generates (findElementwiseGroups) and
/// records them in the graph (Graph::kernels); it must run last, as any later change drops them.
/// With `chooseMatmul`, matmuls it picks lead the groups that read them (their epilogues) or run
/// as kernels of their own.
std::unique_ptr<Pass> createFuse(std::shared_ptr<const Target> target,
                                 MatmulChooser chooseMatmul = {});
/// "output-grads": appends the gradients of the program's differentiable outputs with respect to
/// its `wrt` values, each output seeded by a new argument (OutputGradients.cpp).
std::unique_ptr<Pass> createOutputGradients();
/// "mask-rows": masks the padded rows of the program's dynamic dimension (maskPaddedRows, given
/// the probe trace), keeping its seeds and gradients in step.
std::unique_ptr<Pass> createMaskRows();
/// "split": splits a program holding output gradients into its forward and backward graphs
/// (splitForwardBackward) and records what the backward saves.
std::unique_ptr<Pass> createSplit();
/// Generated code for a graph's fuse-pass kernels (Graph::kernels): per kernel its index in the
/// table, or -1 where codegen could not build it (the interpreter runs that group's nodes where
/// the group runs). No indices at all: every node runs alone, in graph order.
struct GeneratedKernels {
  std::vector<int32_t> kernelOf;
  KernelTable table;
};
using KernelCompiler = std::function<ir::Result<GeneratedKernels>(const ir::Graph&)>;
/// "lower": turns each graph of the program into the executable that runs it (ir::lowerSteps),
/// its kernels compiled by `compile`; without one, each kernel is a launch of a table without
/// code (weft-opt prints such plans). Runs after fuse.
std::unique_ptr<Pass> createLower(KernelCompiler compile = {});
/// "plan-memory": gives each lowered executable its memory plan (runtime planMemory).
std::unique_ptr<Pass> createPlanMemory();
/// The passes compile() runs, in order: on the program output-grads, mask-rows, split; on each
/// graph simplify, fold, simplify, cse, dce, remat, dce, hoist, expand-softmax, split-sums,
/// fuse; then on the program lower and plan-memory. compile()'s executable cache keys each graph
/// as the graph passes receive it (the passes from there on run per graph).
const std::vector<std::string>& compilePipeline();
/// The pass called `name`, or null if there is none. The passes that ask a code generator what
/// it can do (remat, fuse, fuse-matmul) ask `target`; without one they fail with a diagnostic.
std::unique_ptr<Pass> createPass(std::string_view name,
                                 std::shared_ptr<const Target> target = nullptr);
/// Names of every registered pass.
std::vector<std::string> passNames();

/// Runs passes in order, verifying the program's graphs after each; an internal error's diagnostic
/// names the pass. Honors WEFT_PRINT_IR_AFTER (a pass name or "all"), WEFT_DUMP_DIR (writes
/// NN-<pass>.wir files), WEFT_TIME_PASSES=1 and WEFT_SKIP_PASSES (graph passes add() leaves
/// out; program passes are never left out).
class PassManager {
public:
  PassManager();
  PassManager& add(std::unique_ptr<Pass> pass);
  /// Runs the pipeline; true if any pass changed the program.
  ir::Result<bool> run(Program& p);
  /// Runs the pipeline on a program of the one graph `g` (a program pass finds nothing to do).
  ir::Result<bool> run(ir::Graph& g);

private:
  std::vector<std::unique_ptr<Pass>> passes_;
  std::string printAfter_, dumpDir_;
  bool timePasses_ = false;
};

} // namespace weft::passes
