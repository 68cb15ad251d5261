// The umbrella header: everything a user of weft needs.
#pragma once

#include "weft/Autograd.h"
#include "weft/Compile.h"
#include "weft/Functions.h"
#include "weft/Indexing.h"
#include "weft/Tensor.h"
#include "weft/runtime/ThreadPool.h"
