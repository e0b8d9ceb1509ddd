# cpp-httplib (Debian: libcpp-httplib-dev, a shared library with the header) as the target
# cudal1::httplib, for `cudal1 serve` and the scripted LLM test server. Found through
# pkg-config, or under CUDAL1_HTTPLIB_ROOT (a directory holding include/httplib.h and
# lib/libcpp-httplib.so*, e.g. Debian's .debs of cpp-httplib and libssl-dev unpacked on a machine
# without them).
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
             HINTS ${CUDAL1_HTTPLIB_ROOT}/lib ${CUDAL1_HTTPLIB_ROOT}/lib/x86_64-linux-gnu
                   ${CUDAL1_HTTPLIB_ROOT}/usr/lib/x86_64-linux-gnu)
# Debian builds the library with OpenSSL support, which adds a member to httplib::Request: code
# using the header must say so too, and needs OpenSSL's headers for it (libssl-dev, or its .deb
# unpacked under the same root). Compression support changes no class the server uses.
find_path(CUDAL1_OPENSSL_INCLUDE openssl/ssl.h HINTS ${CUDAL1_HTTPLIB_ROOT}/include)
find_path(CUDAL1_OPENSSL_CONF_INCLUDE openssl/opensslconf.h
          HINTS ${CUDAL1_HTTPLIB_ROOT}/include/x86_64-linux-gnu ${CUDAL1_HTTPLIB_ROOT}/include
          PATHS /usr/include/x86_64-linux-gnu)
if(CUDAL1_HTTPLIB_INCLUDE AND CUDAL1_HTTPLIB_LIBRARY AND CUDAL1_OPENSSL_INCLUDE AND CUDAL1_OPENSSL_CONF_INCLUDE)
  add_library(cudal1::httplib INTERFACE IMPORTED GLOBAL)
  set_target_properties(cudal1::httplib PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES
      "${CUDAL1_HTTPLIB_INCLUDE};${CUDAL1_OPENSSL_INCLUDE};${CUDAL1_OPENSSL_CONF_INCLUDE}"
    INTERFACE_LINK_LIBRARIES "${CUDAL1_HTTPLIB_LIBRARY};Threads::Threads"
    INTERFACE_COMPILE_DEFINITIONS CPPHTTPLIB_OPENSSL_SUPPORT)
elseif(CUDAL1_HTTPLIB_ROOT)
  message(STATUS "cudal1: CUDAL1_HTTPLIB_ROOT=${CUDAL1_HTTPLIB_ROOT} lacks httplib.h, libcpp-httplib or OpenSSL's headers")
endif()
