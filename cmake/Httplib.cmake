# cpp-httplib (Debian: libcpp-httplib-dev, a shared library with the header) as the target
# cudal1::httplib, for `cudal1 serve` and the scripted LLM test server. Found through
# pkg-config, or under CUDAL1_HTTPLIB_ROOT (a directory holding include/httplib.h and
# lib/libcpp-httplib.so*, e.g. Debian's .deb unpacked on a machine without the package).
if(TARGET cudal1::httplib)
  return()
endif()
set(CUDAL1_HTTPLIB_ROOT "" CACHE PATH "where cpp-httplib was unpacked when pkg-config does not know it")
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND AND NOT CUDAL1_HTTPLIB_ROOT)
  pkg_check_modules(HTTPLIB QUIET IMPORTED_TARGET GLOBAL cpp-httplib)
  if(HTTPLIB_FOUND)
    add_library(cudal1::httplib ALIAS PkgConfig::HTTPLIB)
    return()
  endif()
endif()
find_path(CUDAL1_HTTPLIB_INCLUDE httplib.h HINTS ${CUDAL1_HTTPLIB_ROOT}/include ${CUDAL1_HTTPLIB_ROOT}/usr/include)
find_library(CUDAL1_HTTPLIB_LIBRARY NAMES cpp-httplib libcpp-httplib.so.0.11
             HINTS ${CUDAL1_HTTPLIB_ROOT}/lib ${CUDAL1_HTTPLIB_ROOT}/usr/lib/x86_64-linux-gnu)
if(CUDAL1_HTTPLIB_INCLUDE AND CUDAL1_HTTPLIB_LIBRARY)
  add_library(cudal1::httplib INTERFACE IMPORTED)
  set_target_properties(cudal1::httplib PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES ${CUDAL1_HTTPLIB_INCLUDE}
    INTERFACE_LINK_LIBRARIES "${CUDAL1_HTTPLIB_LIBRARY};Threads::Threads"
    # Debian builds the library with these; the header's declarations must match it.
    INTERFACE_COMPILE_DEFINITIONS
      "CPPHTTPLIB_OPENSSL_SUPPORT;CPPHTTPLIB_ZLIB_SUPPORT;CPPHTTPLIB_BROTLI_SUPPORT")
endif()
