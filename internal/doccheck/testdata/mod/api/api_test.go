package api

func BadButInATestFile() {}
