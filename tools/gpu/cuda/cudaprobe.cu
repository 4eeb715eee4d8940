// A CUDA program with no driver of its own (the runtime is linked statically): it runs only
// where the host's driver library (libcuda.so.1) and device nodes are passed in.
#include <cstdio>
#include <cuda_runtime.h>

__global__ void add(const float *a, const float *b, float *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

int main() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("NO-GPU %s\n", cudaGetErrorString(err));
    return 1;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  const int n = 1 << 20;
  static float ha[1 << 20], hb[1 << 20], hc[1 << 20];
  for (int i = 0; i < n; ++i) { ha[i] = 1.0f; hb[i] = 2.0f; }
  float *a, *b, *c;
  cudaMalloc(&a, n * sizeof(float));
  cudaMalloc(&b, n * sizeof(float));
  cudaMalloc(&c, n * sizeof(float));
  cudaMemcpy(a, ha, n * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(b, hb, n * sizeof(float), cudaMemcpyHostToDevice);
  add<<<(n + 255) / 256, 256>>>(a, b, c, n);
  err = cudaMemcpy(hc, c, n * sizeof(float), cudaMemcpyDeviceToHost);
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += hc[i];
  std::printf("GPU-OK %s devices=%d sum=%.0f %s\n", prop.name, count, sum,
              cudaGetErrorString(err));
  return sum == 3.0 * n ? 0 : 2;
}
