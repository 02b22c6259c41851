ONE
two
three