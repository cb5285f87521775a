// The target that owns the test programs' precompiled header (tests/CMakeLists.txt); nothing of its own.
