#define gpufeed gpufeed_new
#define AB_NS ab_new
#include "ab_impl.inc"
