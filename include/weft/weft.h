// The umbrella header: everything a user of weft needs.
#pragma once

#include "weft/Autograd.h"
#include "weft/Compile.h"
#include "weft/Functions.h"
#include "weft/Indexing.h"
#include "weft/nn.h"
#include "weft/Safetensors.h"
#include "weft/Tensor.h"
#include "weft/data/DataLoader.h"
#include "weft/data/Dataset.h"
#include "weft/data/Datasets.h"
#include "weft/data/Readers.h"
#include "weft/data/Samplers.h"
#include "weft/data/Transforms.h"
#include "weft/runtime/ThreadPool.h"
