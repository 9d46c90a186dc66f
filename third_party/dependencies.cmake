# Build glue for the system packages wpk uses (all from Debian; see scripts/setup.sh).
# Each becomes one wpk::<name> interface target so the rest of the build names what it needs.
# Installed as wpkDependencies.cmake: the CMake package includes it to find them again for the
# static library (WPK_WITH_ONEDNN says whether oneDNN is one), at most once per directory.
if(TARGET wpk::onnx)
  return()
endif()
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(ONNX REQUIRED)
find_package(Eigen3 3.3 REQUIRED NO_MODULE)
find_package(spdlog REQUIRED)

add_library(wpk::onnx INTERFACE IMPORTED)
target_link_libraries(wpk::onnx INTERFACE onnx onnx_proto protobuf::libprotobuf)

add_library(wpk::eigen INTERFACE IMPORTED)
target_link_libraries(wpk::eigen INTERFACE Eigen3::Eigen)

add_library(wpk::spdlog INTERFACE IMPORTED)
target_link_libraries(wpk::spdlog INTERFACE spdlog::spdlog)

# OpenMP (libgomp): wpk's own kernels (Eigen's products) and oneDNN share its thread pool.
find_package(OpenMP REQUIRED)
add_library(wpk::openmp INTERFACE IMPORTED)
target_link_libraries(wpk::openmp INTERFACE OpenMP::OpenMP_CXX)

if(WPK_WITH_ONEDNN)
  find_package(dnnl REQUIRED)
  add_library(wpk::onednn INTERFACE IMPORTED)
  target_link_libraries(wpk::onednn INTERFACE DNNL::dnnl)
endif()
