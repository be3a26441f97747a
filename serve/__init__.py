"""`gptkit serve`: a checkpoint behind the OpenAI API (serve/server.py), and a chat page."""
