# hiredis, the Redis client of the evaluation queue (src/queue: `cudal1 worker`, `cudal1 queue`,
# --queue). Optional: without its headers everything else builds, and --queue says why it cannot
# be used. HIREDIS_ROOT (a CMake or environment variable) names a prefix to search first, such
# as a directory where Debian's libhiredis-dev and libhiredis0.14 packages were unpacked with
# `dpkg -x` (bench/queue_scaling.sh does this on machines without them installed).
# -DCUDAL1_QUEUE=OFF leaves the queue out even where hiredis is installed.
option(CUDAL1_QUEUE "Build the Redis queue where hiredis is found" ON)
set(HIREDIS_ROOT "$ENV{HIREDIS_ROOT}" CACHE PATH "Prefix holding include/hiredis/hiredis.h")
find_path(HIREDIS_INCLUDE_DIR hiredis/hiredis.h
          HINTS ${HIREDIS_ROOT}/usr/include ${HIREDIS_ROOT}/include)
find_library(HIREDIS_LIBRARY NAMES hiredis
             HINTS ${HIREDIS_ROOT}/usr/lib/x86_64-linux-gnu ${HIREDIS_ROOT}/usr/lib/aarch64-linux-gnu
                   ${HIREDIS_ROOT}/usr/lib ${HIREDIS_ROOT}/lib)
if(NOT CUDAL1_QUEUE)
  set(CUDAL1_HAVE_HIREDIS OFF)
  message(STATUS "cudal1: CUDAL1_QUEUE=OFF: cudal1 worker, cudal1 queue and --queue are not built")
elseif(HIREDIS_INCLUDE_DIR AND HIREDIS_LIBRARY)
  set(CUDAL1_HAVE_HIREDIS ON)
  message(STATUS "cudal1: hiredis in ${HIREDIS_INCLUDE_DIR} (${HIREDIS_LIBRARY}): the Redis queue is built")
else()
  set(CUDAL1_HAVE_HIREDIS OFF)
  message(STATUS "cudal1: no hiredis headers (libhiredis-dev) found: cudal1 worker, cudal1 queue "
                 "and --queue are not built (-DHIREDIS_ROOT=DIR points at an unpacked prefix)")
endif()
