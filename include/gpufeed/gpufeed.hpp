// gpufeed — umbrella header for the host core (no CUDA, HDF5 or LMDB includes).
// Component headers are included on their own: gpufeed/hdf5_source.hpp, gpufeed/lmdb_source.hpp,
// gpufeed/cuda/*.hpp.
#pragma once

#include "gpufeed/batch.hpp"
#include "gpufeed/batch_view.hpp"
#include "gpufeed/bounded_queue.hpp"
#include "gpufeed/error.hpp"
#include "gpufeed/loader.hpp"
#include "gpufeed/loader_config.hpp"
#include "gpufeed/memory.hpp"
#include "gpufeed/sampler.hpp"
#include "gpufeed/source.hpp"
#include "gpufeed/stats.hpp"
#include "gpufeed/target.hpp"
#include "gpufeed/verdict.hpp"
