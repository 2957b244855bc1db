// Everything of the public C++ API.
#pragma once

#include "shardjit/collective_path.hpp"
#include "shardjit/communicator.hpp"
#include "shardjit/dtype.hpp"
#include "shardjit/error.hpp"
#include "shardjit/linear_logp.hpp"
#include "shardjit/logging.hpp"
#include "shardjit/moe_combine.hpp"
#include "shardjit/prewarm.hpp"
#include "shardjit/reduce_scatter.hpp"
#include "shardjit/runtime.hpp"
#include "shardjit/tensor.hpp"
