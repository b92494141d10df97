#include "register.hpp"
namespace genesis::cpu {
void register_attention(KernelTable&) {}
}
