"""Figures: the explorer's panels as Plotly figures, the Why view's token strip."""
