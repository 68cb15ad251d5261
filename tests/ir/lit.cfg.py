# lit configuration for the golden IR tests: each .wir file runs weft-opt and checks with FileCheck.
import os
import lit.formats

config.name = "weft-ir"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".wir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = config.weft_test_exec_root
config.substitutions.append(("weft-opt", config.weft_opt))
config.environment["PATH"] = os.pathsep.join([config.llvm_tools_dir, config.environment.get("PATH", "")])
