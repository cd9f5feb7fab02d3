// stub: the emulator provides these in kir_emu_cuda.h
#pragma once
