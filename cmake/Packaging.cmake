# The Debian package: `cpack -G DEB` in the build directory makes streamctl_VERSION_ARCH.deb
# from the install() rules (binary, gzipped man pages, completions) plus the examples and the
# copyright file installed here. tests/packaging/deb_install.sh checks it and installs it.
#
# The package installs under /usr; `cmake --install` keeps CMAKE_INSTALL_PREFIX (/usr/local),
# so only CPACK_PACKAGING_INSTALL_PREFIX is set, never CMAKE_INSTALL_PREFIX.

# Examples under /usr/share/doc/streamctl/examples, uncompressed (they are run, not read:
# `streamctl run /usr/share/doc/streamctl/examples/clicks_filter.toml`), with examples/data and
# examples/udf. Plain 0644 files: the udf scripts are started through their interpreter.
# Running the Python udf in the source tree (tests/e2e/exec_operator.sh) leaves a __pycache__
# beside it, which is no part of the examples.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples
  PATTERN __pycache__ EXCLUDE)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/debian/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(STREAMCTL_DEB_MAINTAINER "streamctl maintainers <maintainers@users.noreply.a-seed-be281013.example>"
  CACHE STRING "Maintainer field of the Debian package (NAME <EMAIL>)")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME streamctl)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT ${STREAMCTL_DEB_MAINTAINER})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Directories that install() creates are 0755 whatever the umask of the one who runs cpack.
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
  OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
# Debian ships binaries stripped (lintian: unstripped-binary-or-object).
set(CPACK_STRIP_FILES ON)

# streamctl_0.1.0_amd64.deb; the architecture is left to CPack, which asks
# `dpkg --print-architecture`.
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${STREAMCTL_DEB_MAINTAINER})
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends from the libraries the binary links (libzmq5, liblz4-1, libstdc++6, ...), found by
# dpkg-shlibdeps (package dpkg-dev; CPack also needs `file` to find the ELF files).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The udf examples run python3 (the awk ones run awk, which every Debian system has).
set(CPACK_DEBIAN_PACKAGE_SUGGESTS python3)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# The first line is the synopsis, the rest the extended description (each line indented by
# CPack); no trailing newline, which would make an empty continuation line.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "stream processor for the terminal
streamctl reads a TOML pipeline of sources, operators and sinks, starts worker
processes, links them with ZeroMQ and streams records through them in batches.
It works as a filter in a shell pipeline (stdin to stdout) and on files, with
the planning, fusion, partitioning, checkpoints and savepoints of a dataflow
engine.")

include(CPack)
