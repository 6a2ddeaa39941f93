/* A stand-in for NVIDIA's nccl.h, for the original C++ example's harness
 * (nccl_allreduce_harness.cpp): the part of the API the harness uses, with the same names and
 * signature. ncclAllReduce is defined by the harness; it sums float buffers between two ranks,
 * which are processes or threads. */
#ifndef NCCL_H_
#define NCCL_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ncclComm *ncclComm_t;
typedef struct CUstream_st *cudaStream_t;

typedef enum { ncclSuccess = 0, ncclSystemError = 2, ncclInvalidArgument = 4 } ncclResult_t;
typedef enum { ncclFloat32 = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;

/* Sums `count` elements of every rank's `sendbuff` into every rank's `recvbuff`. */
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
