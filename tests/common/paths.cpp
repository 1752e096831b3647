#include "common/paths.hpp"
