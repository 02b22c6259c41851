one
two
four