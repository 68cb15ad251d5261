// weft::nn: modules, layers, activations, losses, containers, initializers, functional ops,
// LibTorch's top-level nn functions and weft::save / weft::load.
#pragma once

#include "weft/Checkpoint.h"
#include "weft/Export.h"
#include "weft/Serialize.h"
#include "weft/nn/Activation.h"
#include "weft/nn/Container.h"
#include "weft/nn/Functional.h"
#include "weft/nn/Init.h"
#include "weft/nn/Layers.h"
#include "weft/nn/Loss.h"
#include "weft/nn/Module.h"
#include "weft/nn/Recurrent.h"
#include "weft/nn/TopLevel.h"
#include "weft/nn/Transformer.h"
#include "weft/optim/Optimizer.h"
#include "weft/optim/Schedulers.h"
