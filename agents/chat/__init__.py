"""What the coachee's browser talks to: the pages, the chat socket, Coach's streamed reply."""
