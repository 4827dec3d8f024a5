#include <cstdio>
int main() { std::puts("streamctl"); return 0; }
