// CUB: the emulator provides WarpReduce in ../cub.cuh
#pragma once
#include "../cub.cuh"
