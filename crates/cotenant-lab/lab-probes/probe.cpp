// What C++ code sizes thread pools by: std::thread::hardware_concurrency().
#include <iostream>
#include <thread>

int main() { std::cout << std::thread::hardware_concurrency() << std::endl; }
