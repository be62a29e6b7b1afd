package bare

// Good has a doc comment.
func Good() {}
