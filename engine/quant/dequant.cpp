#include "engine/quant/dequant.h"
