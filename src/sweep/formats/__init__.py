"""What goes in and out: corpora, golden sets, runs, and the line readers that name the file and line of every problem."""
