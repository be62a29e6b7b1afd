package hidden

func BadButInternal() {}
