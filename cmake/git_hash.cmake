# Run at every build (cmake -P): writes OUTPUT from TEMPLATE with the commit checked out now, so
# `genesis --version` names the commit it was built from after a pull or a commit, not the one
# CMake was configured at. configure_file rewrites OUTPUT only when the hash changed, so an
# unchanged checkout recompiles nothing.
execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE GENESIS_GIT_HASH OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT GENESIS_GIT_HASH)
  set(GENESIS_GIT_HASH "unknown")
endif()
configure_file(${TEMPLATE} ${OUTPUT} @ONLY)
