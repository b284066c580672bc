#define gpufeed gpufeed_base
#define AB_NS ab_base
#include "ab_impl.inc"
