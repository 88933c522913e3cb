"""Line-format knowledge: each family of log line, declared once with its real sample lines."""
