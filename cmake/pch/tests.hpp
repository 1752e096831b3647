// Precompiled once per build (cmake/pch.cmake) and force-included in every test file:
// GoogleTest and GoogleMock on top of the layers' set. Every test file still includes
// what it uses; this list only makes it cheaper.
#pragma once

#include "layers.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
