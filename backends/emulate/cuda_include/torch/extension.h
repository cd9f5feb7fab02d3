// PyTorch: the emulator provides its device-side names in kir_emu_torch.h
#pragma once
#include "kir_emu_torch.h"
