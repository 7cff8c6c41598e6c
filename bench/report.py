import sys; print("report: todo", sys.argv)
