"""Pages of the Streamlit app; `app.py` routes between them."""
