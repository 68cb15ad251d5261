// Which matmuls compile() runs as generated GEMMs with their epilogues: measured per shape.
#pragma once

#include "weft/codegen/Jit.h"
#include "weft/passes/Pass.h"

namespace weft {

/// The fuse pass's matmul chooser for code built for `target`: a matmul leads the group that reads
/// it (a generated GEMM with the group as its epilogue) where, at its shape, with B as laid out
/// and this process's threads, the generated GEMM alone is faster than OpenBLAS alone, measured
/// on scratch data once per shape (up to 1024 rows), one probe at a time; the answer is kept in
/// memory and in the kernel cache (`choices`), so later compilations and processes do not
/// measure again. The epilogue's own pass over memory, which the fused kernel spares, is not
/// counted: a tie goes to OpenBLAS, as does a probe that cannot run (not remembered). Code for
/// another CPU than this one cannot be measured here: OpenBLAS; nor is a GEMM of fewer than 2^20
/// multiply-adds (its probe would cost more than it could save): OpenBLAS. WEFT_GEMM=generated or
/// WEFT_GEMM=blas decides for every shape without measuring (any other value is a ValueError).
passes::MatmulChooser matmulChooser(const codegen::CpuTarget& target);

} // namespace weft
