#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
#include "core/host_tensor.h"
#include "core/plan.h"
#include "core/problem.h"
#include "cpu/engines.h"
#include "cpu/fast.h"
#include "mxattn/mx.h"
using namespace mxattn;
int main(int argc, char** argv){
  bool fp8 = argc>1 && argv[1][0]=='8'; int threads = argc>2? atoi(argv[2]) : 1; int64_t Sk = 32768, H=8, D=128, Hq=32;
  int copies = argc>3? atoi(argv[3]) : 8;
  std::mt19937 rng(1); std::normal_distribution<float> nd;
  struct KV { core::HostTensor k,v,ks,vs; };
  std::vector<KV> kvs;
  for (int c=0;c<copies;++c){ KV kv; core::HostTensor kf(DType::f32,{1,Sk,H,D}), vf(DType::f32,{1,Sk,H,D});
    for(int64_t i=0;i<kf.numel();++i){kf.data<float>()[i]=nd(rng)*0.3f; vf.data<float>()[i]=nd(rng);} 
    if(fp8){ kv.k=core::HostTensor(DType::e4m3,{1,Sk,H,D}); kv.v=core::HostTensor(DType::e4m3,{1,Sk,H,D}); kv.ks=core::HostTensor(DType::e8m0,{1,Sk,H,D/32}); kv.vs=core::HostTensor(DType::e8m0,{1,Sk,H,D/32});
      (void)quantize(kf.view(), kv.k.view(), kv.ks.view(), 3, ScaleMode::floor); (void)quantize(vf.view(), kv.v.view(), kv.vs.view(), 3, ScaleMode::floor);}
    else { kv.k=core::HostTensor(DType::bf16,{1,Sk,H,D}); kv.v=core::HostTensor(DType::bf16,{1,Sk,H,D}); for(int64_t i=0;i<kf.numel();++i){core::store_float(kv.k.view(),i,kf.data<float>()[i]); core::store_float(kv.v.view(),i,vf.data<float>()[i]);} }
    kvs.push_back(std::move(kv)); }
  core::HostTensor q(DType::bf16,{1,1,Hq,D}), o(DType::bf16,{1,1,Hq,D});
  for (int64_t i=0;i<q.numel();++i) core::store_float(q.view(),i,nd(rng));
  double best=1e9;
  for (int rep=0; rep<3*copies; ++rep){ KV& kv=kvs[rep%copies]; AttentionArgs a; a.q=q.view(); a.k=kv.k.view(); a.v=kv.v.view(); a.o=o.view(); if(fp8){a.k_scales=kv.ks.view(); a.v_scales=kv.vs.view();}
    timespec c0; clock_gettime(CLOCK_MONOTONIC,&c0); core::Problem p; if(!core::validate_problem(a,&p)) {printf("invalid\n"); return 1;} auto sp=core::resolve_split(p,64,64); cpu::run_fast_with(cpu::SimdIsa::avx512,p,sp,threads);
    timespec c1; clock_gettime(CLOCK_MONOTONIC,&c1); double ms=(c1.tv_sec-c0.tv_sec)*1e3+(c1.tv_nsec-c0.tv_nsec)*1e-6; if(ms<best) best=ms; }
  double bytes = fp8 ? 2.0*Sk*H*D*(1+1.0/32) : 2.0*Sk*H*D*2;
  printf("%s threads %d best %.2f ms  %.2f GB/s\n", fp8?"fp8":"bf16", threads, best, bytes/best/1e6);
}
