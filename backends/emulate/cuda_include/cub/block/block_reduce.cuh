// CUB: the emulator provides BlockReduce in ../cub.cuh
#pragma once
#include "../cub.cuh"
