// STUB: the mxattn command line (being written).
#include <cstdio>
int main() { std::puts("mxattn"); return 0; }
