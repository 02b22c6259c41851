new file
second line
