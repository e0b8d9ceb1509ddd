// cudal1_digest: adds mix(word[i] ^ index_key(i)) over `words` 8-byte words at `data` into *sum
// (mod 2^64). The host's digest_words (src/common/digest.cpp) computes the same sum; the
// worker finishes it with digest_finish. `data` must be 8-byte aligned.
//
// digest_kernel.ptx is generated from this file, and checked in so that the worker builds
// without nvcc:
//   nvcc -ptx -arch=compute_75 -O3 -o src/worker/digest_kernel.ptx src/worker/digest_kernel.cu
// then its `.version` lowered to 7.0 (what it uses is older), so that drivers older than the
// toolkit load it too; `ptxas -arch=sm_90 digest_kernel.ptx` checks the result.

__device__ __forceinline__ unsigned long long mix(unsigned long long z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__device__ __forceinline__ unsigned long long index_key(unsigned long long i) {
  return i * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
}

extern "C" __global__ void cudal1_digest(const unsigned long long* __restrict__ data,
                                         unsigned long long words, unsigned long long* sum) {
  unsigned long long acc = 0;
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < words; i += stride) {
    acc += mix(__ldg(data + i) ^ index_key(i));
  }
  for (int offset = 16; offset > 0; offset >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, offset);
  if ((threadIdx.x & 31) == 0 && acc != 0) atomicAdd(sum, acc);
}
