// Compiles tests/CMakeLists.txt's precompiled header (npusim_test_pch), which every test target reuses.
