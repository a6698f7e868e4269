#!/bin/bash
# Two private MPS servers on one GPU: start cost, coexistence, fault containment between them.
set -u
TAG=plain python first_kernel.py
for s in A B; do
  mkdir -p /tmp/mps$s/pipe /tmp/mps$s/log
  t0=$(date +%s.%N)
  CUDA_MPS_PIPE_DIRECTORY=/tmp/mps$s/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps$s/log nvidia-cuda-mps-control -d
  echo "daemon $s started in $(python3 -c "import sys;print(round(float(sys.argv[1])-float(sys.argv[2]),3))" $(date +%s.%N) $t0) s rc=$?"
done
CUDA_MPS_PIPE_DIRECTORY=/tmp/mpsA/pipe TAG=A1 python first_kernel.py
CUDA_MPS_PIPE_DIRECTORY=/tmp/mpsA/pipe TAG=A2 python first_kernel.py
CUDA_MPS_PIPE_DIRECTORY=/tmp/mpsB/pipe TAG=B1 python first_kernel.py
echo "=== again A3 B3\nCUDA_MPS_PIPE_DIRECTORY=/tmp/mpsA/pipe TAG=A3 python first_kernel.py\n=== fault in B, bystanders in A and plain"
(CUDA_MPS_PIPE_DIRECTORY=/tmp/mpsA/pipe python mps_fault.py bystander & python mps_fault.py plain & CUDA_MPS_PIPE_DIRECTORY=/tmp/mpsB/pipe python mps_fault.py faulty & wait)
echo "=== B after its fault"
CUDA_MPS_PIPE_DIRECTORY=/tmp/mpsB/pipe TAG=B2 python first_kernel.py
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
for s in A B; do
  t0=$(date +%s.%N)
  echo quit | CUDA_MPS_PIPE_DIRECTORY=/tmp/mps$s/pipe nvidia-cuda-mps-control
  echo "daemon $s quit in $(python3 -c "import sys;print(round(float(sys.argv[1])-float(sys.argv[2]),3))" $(date +%s.%N) $t0) s"
done
sleep 1; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
