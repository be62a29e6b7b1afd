package bare
