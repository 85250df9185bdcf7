#include "engine/tokenizer.h"
