// Sequential, random and distributed sample orders.
#include "weft/data/Samplers.h"

#include "weft/Functions.h"

#include <numeric>

namespace weft::data {
namespace {

/// randperm(size) drawn at offset `epoch` of the stream `seed`: one draw per epoch.
std::vector<size_t> permutation(size_t size, uint64_t seed, uint64_t epoch) {
  Generator gen(seed);
  gen.set_offset(epoch);
  std::vector<int64_t> perm = randperm(static_cast<int64_t>(size), gen).to_vector<int64_t>();
  return {perm.begin(), perm.end()};
}

} // namespace

std::vector<size_t> SequentialSampler::indices(size_t size, uint64_t) const {
  std::vector<size_t> out(size);
  std::iota(out.begin(), out.end(), size_t{0});
  return out;
}

std::vector<size_t> RandomSampler::indices(size_t size, uint64_t epoch) const {
  return permutation(size, seed_, epoch);
}

DistributedSampler::DistributedSampler(size_t num_replicas, size_t rank, bool shuffle,
                                       uint64_t seed, bool allow_duplicates,
                                       std::source_location loc)
    : numReplicas_(num_replicas), rank_(rank), shuffle_(shuffle), seed_(seed),
      allowDuplicates_(allow_duplicates) {
  CallSite cs(loc);
  WEFT_CHECK(num_replicas >= 1, Value, "DistributedSampler: num_replicas must be at least 1");
  WEFT_CHECK(rank < num_replicas, Value, "DistributedSampler: rank ", rank, " is out of range for ",
             num_replicas, " replicas (0 <= rank < num_replicas)");
}

size_t DistributedSampler::shardSize(size_t size, size_t num_replicas, bool allow_duplicates) {
  return size / num_replicas + (allow_duplicates && size % num_replicas != 0 ? 1 : 0);
}

std::vector<size_t> DistributedSampler::indices(size_t size, uint64_t epoch) const {
  if (size == 0) return {};
  std::vector<size_t> order =
      shuffle_ ? permutation(size, seed_, epoch) : SequentialSampler().indices(size, epoch);
  // As PyTorch: pad to a multiple of the replica count by repeating the order from its start
  // (or, without duplicates, cut the order to one).
  const size_t perReplica = shardSize(size, numReplicas_, allowDuplicates_);
  std::vector<size_t> shard;
  shard.reserve(perReplica);
  for (size_t k = 0; k < perReplica; ++k)
    shard.push_back(order[(rank_ + k * numReplicas_) % size]);
  return shard;
}

samplers::RandomSampler::RandomSampler(int64_t size, DType index_dtype, std::source_location loc)
    : size_(static_cast<size_t>(size)) {
  CallSite cs(loc);
  WEFT_CHECK(size >= 0, Value, "RandomSampler: size must be non-negative, got ", size);
  WEFT_CHECK(isIntegral(index_dtype), DType,
             "RandomSampler: index_dtype must be an integer dtype, ", "got ",
             dtypeName(index_dtype));
}

samplers::DistributedSampler::DistributedSampler(const char* sampler, size_t size,
                                                 size_t num_replicas, size_t rank,
                                                 bool allow_duplicates, std::source_location loc)
    : size_(size), numReplicas_(num_replicas), rank_(rank), allowDuplicates_(allow_duplicates) {
  CallSite cs(loc);
  WEFT_CHECK(num_replicas >= 1, Value, sampler, ": num_replicas must be at least 1");
  WEFT_CHECK(rank < num_replicas, Value, sampler, ": rank ", rank, " is out of range for ",
             num_replicas, " replicas (0 <= rank < num_replicas)");
}

samplers::DistributedRandomSampler::DistributedRandomSampler(size_t size, size_t num_replicas,
                                                             size_t rank, bool allow_duplicates,
                                                             std::source_location loc)
    : DistributedSampler("DistributedRandomSampler", size, num_replicas, rank, allow_duplicates,
                         loc) {}

samplers::DistributedSequentialSampler::DistributedSequentialSampler(
    size_t size, size_t num_replicas, size_t rank, bool allow_duplicates, std::source_location loc)
    : DistributedSampler("DistributedSequentialSampler", size, num_replicas, rank, allow_duplicates,
                         loc) {}

} // namespace weft::data
