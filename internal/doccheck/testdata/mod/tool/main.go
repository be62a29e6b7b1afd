package main

func BadButMain() {}

func main() {}
