# CMake package for Mote's C ABI: find_package(mote) gives the imported targets
#   mote::mote          the shared library (libmote.so)
#   mote::mote_static   the static library (libmote.a), with the link flags it needs
# Installed by scripts/ffi-install.sh; relocatable (paths are relative to this file).
get_filename_component(_mote_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)

if(NOT TARGET mote::mote)
  find_package(Threads REQUIRED)

  add_library(mote::mote SHARED IMPORTED)
  set_target_properties(mote::mote PROPERTIES
    IMPORTED_LOCATION "${_mote_prefix}/lib/libmote.so.0"
    IMPORTED_SONAME "libmote.so.0"
    INTERFACE_INCLUDE_DIRECTORIES "${_mote_prefix}/include")

  add_library(mote::mote_static STATIC IMPORTED)
  set_target_properties(mote::mote_static PROPERTIES
    IMPORTED_LOCATION "${_mote_prefix}/lib/libmote.a"
    INTERFACE_INCLUDE_DIRECTORIES "${_mote_prefix}/include"
    INTERFACE_LINK_LIBRARIES "Threads::Threads;${CMAKE_DL_LIBS};m;rt;util"
    INTERFACE_LINK_OPTIONS "-Wl,--export-dynamic-symbol=TVMFFIErrorSetRaisedFromCStrParts;-Wl,--export-dynamic-symbol=TVMBackendAnyListSetPackedArg;-Wl,--export-dynamic-symbol=TVMBackendAnyListMoveFromPackedReturn;-Wl,--export-dynamic-symbol=TVMBackendAnyListResetItem")
endif()

set(mote_FOUND TRUE)
unset(_mote_prefix)
