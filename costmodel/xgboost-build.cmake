# Settings for the XGBoost C++ build that the xgboost_lib-sys crate runs through cmake-rs.
# That crate takes no options, so .cargo/config.toml hands this file to CMake as
# CMAKE_TOOLCHAIN_FILE: CMake reads it before XGBoost's CMakeLists.txt, and cache entries set
# here win over the defaults there (an initial cache, as `cmake -C` would load). The host's
# own compiler is used as without it.

# The crate asks for RelWithDebInfo. Debug info in XGBoost's template-heavy sources costs a
# third of the compile time and nobody steps through XGBoost: drop -g. The optimisation level
# is the crate's in the cargo profile (OPT_LEVEL, which the build script passes on): the root
# Cargo.toml asks -O1 for debug builds, a third less compile time on the way to the first tuned
# kernel, and -O2 for release (docs/experiments/2026-11-25-first-run.md).
set(xgb_opt "$ENV{OPT_LEVEL}")
if(NOT xgb_opt MATCHES "^[0-3sz]$")
  set(xgb_opt 2)
endif()
set(CMAKE_C_FLAGS_RELWITHDEBINFO "-O${xgb_opt} -DNDEBUG" CACHE STRING "")
set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O${xgb_opt} -DNDEBUG" CACHE STRING "")

# Compile the sources in batches (XGBoost's CMakeLists marks the files that must stay alone):
# its heavy headers are parsed once per batch instead of once per file. Batches of 32 instead
# of CMake's 8 took 15% less CPU (332 -> 280 s, docs/experiments/2026-12-02-first-run.md);
# at 64 two of XGBoost's files declare the same name and the batch does not compile.
set(CMAKE_UNITY_BUILD ON CACHE BOOL "")
set(CMAKE_UNITY_BUILD_BATCH_SIZE 32 CACHE STRING "")

# A static library, linked into the binaries: `target/*/tunehub` runs without a library
# path, and a copied binary needs no libxgboost.so beside it.
set(BUILD_STATIC_LIB ON CACHE BOOL "")

# The library is written to the build directory, not into XGBoost's source tree: that lies in
# the shared cargo registry, where two target directories building at once would collide.
set(KEEP_BUILD_ARTIFACTS_IN_BINARY_DIR ON CACHE BOOL "")
