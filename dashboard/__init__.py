"""Live Plotly Dash dashboard of the traffic system."""
